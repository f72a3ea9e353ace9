#!/bin/bash
mkdir -p /workspace/bin
cat > /workspace/bin/upper.sh <<'EOS'
#!/bin/bash
echo abc | tr a-z A-Z
EOS
chmod +x /workspace/bin/upper.sh
