"""``python -m experiments [NAME …]``: regenerate the experiment pages (``make experiments``)."""

from experiments import main

main()
