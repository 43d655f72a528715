"""The control plane: metadata image, controller, (later) ISR management and groups."""
