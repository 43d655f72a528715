"""pytest-benchmark suites. Run: python -m pytest benches --benchmark-only
(not part of ./scripts/test: figures need a quiet machine; see docs/benchmarks.md)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
