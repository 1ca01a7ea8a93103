// placeholder: see TuningDb.h
