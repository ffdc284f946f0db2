"Shared pytest settings: quiet, offline model loading."
import os

os.environ.setdefault('TOKENIZERS_PARALLELISM', 'false')
os.environ.setdefault('HF_HUB_OFFLINE', '1')  # tests never fetch from a model hub
os.environ.setdefault('TRANSFORMERS_NO_ADVISORY_WARNINGS', '1')
