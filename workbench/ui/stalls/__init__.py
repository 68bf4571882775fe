"""The stall explainer in the window: a short list under each answer and markers on the plots."""
