"""The workbench: chat with local Mixture-of-Experts models and see what every token costs."""

__version__ = "0.1.0"
