#!/bin/bash
mkdir -p /workspace/bin
cat > /workspace/bin/hello.sh <<'EOS'
#!/bin/bash
echo hello
EOS
chmod +x /workspace/bin/hello.sh
