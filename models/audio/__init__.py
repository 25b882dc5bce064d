"""Audio any family handles the same way: resampling a clip and its log-mel spectrogram."""
