#!/usr/bin/env python3
"""Sample VmRSS of process PID every INTERVAL seconds (default 0.02) until
the file STOP exists or the process is gone; print "max mean" in KiB.

    bench/rss.py PID STOP [INTERVAL]
"""
import os
import sys
import time

pid, stop = sys.argv[1], sys.argv[2]
interval = float(sys.argv[3]) if len(sys.argv) > 3 else 0.02
peak = total = n = 0

while not os.path.exists(stop):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    v = int(line.split()[1])
                    peak = max(peak, v)
                    total += v
                    n += 1
                    break
    except OSError:
        break
    time.sleep(interval)

print(peak, total // n if n else 0)
