"""Moving frames between subtasks (internal): stream elements, the channel contract, the frame
codec, transports (in-process, unix/TCP socket, Ray calls), blocking partitions on files, and
the partitioners that pick a channel for each record.
"""
