# exit_status.py — runs a command and then prints "exit N" with its exit status, always
# succeeding, so a lit test can FileCheck the exact status (1 bad input, 2 bad usage).
import subprocess
import sys

if len(sys.argv) < 2:
    sys.exit('usage: exit_status.py COMMAND [ARGS...]')
sys.stdout.flush()
status = subprocess.call(sys.argv[1:])
print('exit %d' % status)
