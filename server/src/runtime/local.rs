//! The local backend: jobs as subprocesses of the server's host. (Being written.)
