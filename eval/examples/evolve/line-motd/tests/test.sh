#!/bin/bash
if printf '%s\n' 'maintenance at noon' | cmp -s - /workspace/motd.txt; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
