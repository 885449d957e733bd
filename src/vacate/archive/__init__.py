"""Cold backup: pax tar parts compressed with zstd, SHA256SUMS, a manifest and a restore README
(writer, reader/verify, restore, local and S3 targets). Restorable with stock tools."""
