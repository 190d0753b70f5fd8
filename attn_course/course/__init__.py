"""What the chapters share: their data and recipes, the claims they print with their measured
ranges, and the multi-seed studies chapters 5, 9 and 10 report.
"""

from pathlib import Path

#: The measured figures the chapters print (multi-seed studies, the claims' spread), shipped with the package.
RESULTS = Path(__file__).resolve().parent / "results"
