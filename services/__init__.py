"""The six Ambient Desk services, one package each, all with the same shape (`main.run`)."""
