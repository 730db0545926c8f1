"""The policy lifecycle: Author -> Test -> Review -> Promote -> Disable / Rollback.

One module per concern: ``suite`` (policy test files) and its runner, ``lint`` (static
analysis), ``regression`` (behavioural diff between two versions), ``suggest`` (drafts
mined from the decision log), ``store`` (versions, approvals, test runs and history in the
engine), ``keys`` (API keys and roles) and ``workflow`` (the rules a promotion obeys).
"""
