#!/bin/bash
cat > /workspace/count_words.sh <<'SCRIPT'
#!/bin/bash
wc -w < "$1"
SCRIPT
chmod +x /workspace/count_words.sh
