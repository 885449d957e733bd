"""The report as one self-contained page: the treemap's layout (treemap.py), the page
(page.py), its template, styles and script."""
