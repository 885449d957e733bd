"""Where things are for the tests: the checkout, its ``src``, the README, the captured
fixtures (``tests/fixtures``, each with its source) and the story's saved observation."""

import os

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(TESTS)
SRC = os.path.join(ROOT, "src")
README = os.path.join(ROOT, "README.md")
FIXTURES = os.path.join(TESTS, "fixtures")
HARNESS = os.path.join(TESTS, "harness")
# the observation of the story's machine (PRODUCT.md): CT 129's /data, the SGLang service
STORY = os.path.join(FIXTURES, "observations", "story.json")
