"""Tables of the rounds bench/report_rounds.sh times: medians of "wall_s max_rss_kb"
files, and markdown rows. Imported by recording_scale.sh and many_stacks.sh."""
import os
import statistics


def med(path, col):
    """Median of column `col` (0: wall s, 1: max RSS KiB) of a rounds file."""
    rows = [l.split() for l in open(path) if l.strip()]
    return statistics.median(float(r[col]) for r in rows)


def time_mb(path):
    """"s / MB" of a rounds file: the previous build's column."""
    return f"{med(path, 0):.2f} / {med(path, 1) / 1024:.0f}"


def has_prev(w, keys):
    """Whether every key has the previous build's rounds (PM_PREV was set)."""
    return all(os.path.exists(f"{w}/prev.{k}.runs") for k in keys)


def print_row(cells):
    print("| " + " | ".join(cells) + " |")


def print_head(head):
    print_row(head)
    print("|" + "---|" * len(head))
