#!/bin/bash
awk '{print $9}' /workspace/access.log | sort | uniq -c | awk '{print $2, $1}' | sort -n \
    > /workspace/status_counts.txt
