"""Tests of agl_core.runner."""
