from tests.e2e.conftest import ready, service, settings  # noqa: F401
