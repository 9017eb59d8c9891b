"""Offline evaluation (LoCoMo loader, recall-at-budget kit, bench runner) and the demo.

Outside the kernel: only the CLI imports it, lazily.
"""
