"""Reports: CSV tables, markdown summaries and plots of evaluation runs."""

from arlkit.report.passkt import plot_passkt, summary_markdown, write_eval_report, write_passkt_csv

__all__ = ["plot_passkt", "summary_markdown", "write_eval_report", "write_passkt_csv"]
