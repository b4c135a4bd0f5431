"""Calibration: human labels read like traces, the judge's agreement with them, and prediction-powered estimates."""

__all__: list[str] = []
