"""Tests of agl_core.algorithm."""
