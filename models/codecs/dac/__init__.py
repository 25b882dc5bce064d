"""The DAC codec (Descript Audio Codec) with exact streaming decode: Dia and Zonos decode with it, and the
DAC-style codecs of Higgs and X-Codec are built from its layers."""
