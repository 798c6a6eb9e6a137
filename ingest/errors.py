"""User-facing errors: each says what is wrong and what to do. Front ends print them, never tracebacks."""


class JaxmemError(Exception):
    exit_code = 1

    def __init__(self, message: str, hint: str = ""):
        self.message, self.hint = message, hint
        super().__init__(message + (f" {hint}" if hint else ""))


class UsageError(JaxmemError):
    exit_code = 2


class IndexMissing(JaxmemError):
    pass


class StoreUnavailable(JaxmemError):
    pass


class StoreCorrupt(JaxmemError):
    pass


class BackendMismatch(JaxmemError):
    pass
