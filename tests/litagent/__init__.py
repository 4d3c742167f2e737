"""Tests of agl_core.litagent."""
