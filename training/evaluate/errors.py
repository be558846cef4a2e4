"""What an evaluation refuses: input the user must fix, printed as one `error:` line (spec.cli.user_errors)."""

from spec.errors import UserError


class EvalError(UserError):
    """A task file, task name, checkpoint or option that cannot be evaluated; names the file or option."""
