"""ESPnet SpeechLM unified text+audio delay-pattern LMs (Bagpiper, OpusLM): see program.py."""
