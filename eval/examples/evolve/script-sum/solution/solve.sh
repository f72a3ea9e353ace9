#!/bin/bash
mkdir -p /workspace/bin
cat > /workspace/bin/sum.sh <<'EOS'
#!/bin/bash
echo $((2 + 3))
EOS
chmod +x /workspace/bin/sum.sh
