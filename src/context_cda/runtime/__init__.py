"""The process a command runs in: SIGTERM as a clean stop, progress bars and log lines, the job's processes.
May import: errors."""
