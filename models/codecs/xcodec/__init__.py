"""X-Codec's encoder design (a DAC acoustic encoder beside a HuBERT semantic one), shared by the Higgs audio
tokenizer and X-Codec."""
