import sys

sys.path.insert(0, "/workspace")
from calc import add, mul

assert add(2, 3) == 5, f"add(2, 3) = {add(2, 3)}"
assert add(-1, 1) == 0
assert add(10, -4) == 6
assert mul(4, 5) == 20
print("calc is right")
