#!/bin/bash
mkdir -p /workspace/bin
cat > /workspace/bin/join.sh <<'EOS'
#!/bin/bash
echo a-b
EOS
chmod +x /workspace/bin/join.sh
