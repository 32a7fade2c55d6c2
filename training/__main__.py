from training.cli import run

run()
