#!/usr/bin/python3
"""Parses a Prometheus scrape with the Prometheus project's own text parser (Debian's
python3-prometheus-client), independently of troupe's writer, and prints each sample:

  parse_prometheus.py FILE

One line a sample: its name, its labels as k=v joined by commas (sorted), and its value.
A scrape the parser refuses ends with an error (exit status 1).
"""
import sys

from prometheus_client.parser import text_string_to_metric_families


def main():
    text = open(sys.argv[1]).read()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join("%s=%s" % (k, v) for k, v in sorted(s.labels.items()))
            print("%s %s %s %s" % (family.type, s.name, labels, repr(float(s.value))))


if __name__ == "__main__":
    main()
