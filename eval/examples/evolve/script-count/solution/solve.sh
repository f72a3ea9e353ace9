#!/bin/bash
mkdir -p /workspace/bin
cat > /workspace/bin/count.sh <<'EOS'
#!/bin/bash
printf 'a\nb\nc\n' | wc -l
EOS
chmod +x /workspace/bin/count.sh
