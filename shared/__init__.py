"""Contracts and runtime shared by every Ambient Desk service.

`shared` never imports `services`; services import `shared` and never each other.
"""
