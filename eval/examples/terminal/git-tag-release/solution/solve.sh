#!/bin/bash
cd /workspace/repo
commit=$(git log --format='%H %s' | awk '$2 == "release:" && $3 == "1.0" {print $1}')
git -c user.name=mol -c user.email=mol@example.com tag -a v1.0 -m "Release 1.0" "$commit"
