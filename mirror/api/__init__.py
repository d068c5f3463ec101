"""Pieces every REST endpoint shares: one error shape, role permissions, pagination, filter parsing."""
