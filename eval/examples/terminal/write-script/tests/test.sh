#!/bin/bash
printf 'one two three\nfour  five\n\nsix\n' > /tmp/words.txt
got=$(/workspace/count_words.sh /tmp/words.txt 2>&1 | tr -d '[:space:]')
echo "count_words.sh printed: $got"
if [ "$got" = "6" ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
