"""The Dia family (Nari Labs): delay-pattern backbone plus the DAC 44.1 kHz codec."""
