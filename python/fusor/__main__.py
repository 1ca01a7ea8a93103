"""`python -m fusor ARGS` (and the `fusor` script pip installs): runs the CLI that ships in the
package, the same program the tuner's pool starts as its workers."""
import os
import sys

from . import WORKER_EXECUTABLE


def main() -> None:
    os.execv(WORKER_EXECUTABLE, [WORKER_EXECUTABLE, *sys.argv[1:]])


if __name__ == "__main__":
    main()
