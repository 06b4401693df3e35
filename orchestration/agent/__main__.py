import os
import sys

from orchestration.agent.main import main

code = main()
sys.stdout.flush()
sys.stderr.flush()
# no interpreter teardown (modules, threads, the GC): inside a Slurm job the allocation is
# held until the agent has exited, and the next run waits for it
os._exit(code)
