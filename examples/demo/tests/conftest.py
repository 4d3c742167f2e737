pytest_plugins = ["agl_core.testing"]
