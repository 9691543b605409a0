"""Live environments behind one small protocol (`base.Sandbox`); backends load lazily."""
