import sys

print("training with", sys.argv[1:])
