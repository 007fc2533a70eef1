package WallMock;

# A mock of Anthropic's OAuth usage-limit wall (R-LANE, t/lane*.t): one
# process serving one connection at a time (Connection: close), so that it
# keeps state; each request is logged as a JSON line (method, path,
# lowercased headers, arrival time).
#
# The behaviour of /m/<k=v,...>/... requests (the provider URL carries it):
#   reset=S      anthropic-ratelimit-unified-reset: now + S (may be < 0)
#   resetat=T    ... that epoch second instead
#   offer=0      no "slow-offer: treatment"
#   slow=X       what a request with "anthropic-usage-limit: slow" gets:
#                ok (200, the default), 529, or a 429 whose slow-status is
#                X (slot_busy, weekly_limit, budget_exhausted, off,
#                ineligible, extra_usage: ineligible + overage-in-use)
#   retry=S, maxwait=S   slow-retry-after, slow-max-wait of a slot_busy
#                or a 529
#   times=N      the slow= answer for the first N slow requests of the
#                path only, then ok (200)
# A request without the slow header gets the wall (429, status rejected),
# unless the limit was reset (below): 200.
#
# The session-limit reset (new(usage => ..., claim => ...)):
#   GET  /api/oauth/usage       usage: avail (a reset offered), used (not
#                               available, next_available_at in 2 days),
#                               fail (500), hang (read, never answer,
#                               until the peer closes: nothing else is
#                               served meanwhile)
#   POST /api/organizations/<org>/reset_rate_limits
#                               claim: reset, not_limited, already_used,
#                               not_offered, fail (500); reset and
#                               not_limited lift the wall

use strict;
use warnings;

use IO::Socket::INET;
use JSON::PP;
use POSIX qw(_exit);
use Time::HiRes qw(sleep);

sub new {
    my ($class, %a) = @_;
    return bless { usage => 'avail', claim => 'reset', %a }, $class;
}

sub port { $_[0]{port} }

sub start {
    my ($self) = @_;

    my $srv = IO::Socket::INET->new(LocalAddr => '127.0.0.1',
                                    LocalPort => $self->{port},
                                    Listen => 64, ReuseAddr => 1)
        or die "WallMock: listen on $self->{port}: $!";

    my $pid = fork;
    die "fork: $!" unless defined $pid;

    if ($pid) {
        $self->{pid} = $pid;
        close $srv;
        return $self;
    }

    my $lifted = 0;
    $self->{served} = {};

    while (my $c = $srv->accept) {
        my $req = read_request($c) or next;
        $req->{time} = Time::HiRes::time();

        if ($req->{path} =~ m{^/api/oauth/usage} && $self->{usage} eq 'hang') {
            if (open my $fh, '>>', $self->{log}) {
                print $fh encode_json($req), "\n";
                close $fh;
            }

            1 while sysread($c, my $x, 4096);
            close $c;
            next;
        }

        my ($status, $hdrs, $body) = $self->answer($req, \$lifted);

        if (open my $fh, '>>', $self->{log}) {
            print $fh encode_json($req), "\n";
            close $fh;
        }

        my $out = "HTTP/1.1 $status X\r\nContent-Type: application/json\r\n"
                . "Content-Length: " . length($body) . "\r\n"
                . "Connection: close\r\n";
        $out .= "$_->[0]: $_->[1]\r\n" for @$hdrs;
        print $c "$out\r\n$body";
        close $c;
    }

    _exit(0);
}

sub read_request {
    my ($c) = @_;
    my $head = '';

    while ($head !~ /\r\n\r\n/) {
        my $n = sysread($c, my $buf, 65536);
        return undef unless $n;
        $head .= $buf;
    }

    my ($h, $rest) = split /\r\n\r\n/, $head, 2;
    my ($line, @lines) = split /\r\n/, $h;
    my ($method, $path) = split / /, $line;
    my %hd;

    for (@lines) {
        my ($k, $v) = split /:\s*/, $_, 2;
        $hd{lc $k} = $v;
    }

    my $len = $hd{'content-length'} || 0;

    while (length($rest) < $len) {
        my $n = sysread($c, my $buf, 65536);
        last unless $n;
        $rest .= $buf;
    }

    return { method => $method, path => $path, headers => \%hd,
             body_len => length $rest };
}

sub answer {
    my ($self, $req, $lifted) = @_;
    my $p = $req->{path};

    if ($p =~ m{^/api/oauth/usage}) {
        my $u = $self->{usage};
        return (500, [], '{"error":"boom"}') if $u eq 'fail';
        my $next = time + 2 * 86400;
        return (200, [], '{"five_hour":{"utilization":100},'
                . '"juniper_tide":{"arm":"reset","available":'
                . ($u eq 'avail' ? 'true' : 'false')
                . ',"next_available_at":' . ($u eq 'avail' ? 'null' : $next)
                . '}}');
    }

    if ($p =~ m{^/api/organizations/[^/]+/reset_rate_limits$}) {
        my $r = $self->{claim};
        return (500, [], '{"error":"boom"}') if $r eq 'fail';
        $$lifted = 1 if $r eq 'reset' || $r eq 'not_limited';
        return (200, [], qq({"result":"$r"}));
    }

    my %o = (reset => 3600, offer => 1, slow => 'ok');

    if ($p =~ m{^/m/([^/]+)/}) {
        for (split /,/, $1) {
            my ($k, $v) = split /=/, $_, 2;
            $o{$k} = $v;
        }
    }

    my $at = defined $o{resetat} ? $o{resetat} : time + $o{reset};
    my $ok = '{"id":"msg_1","type":"message","role":"assistant",'
           . '"model":"claude","content":[{"type":"text","text":"hi"}],'
           . '"usage":{"input_tokens":11,"output_tokens":7}}';
    my $slow = ($req->{headers}{'anthropic-usage-limit'} || '') eq 'slow';
    my $pre = 'anthropic-ratelimit-unified-';
    my $err = '{"type":"error","error":{"type":"rate_limit_error",'
            . '"message":"This request would exceed your account\'s rate '
            . 'limit. Please try again later."}}';

    if (!$slow) {
        return (200, [], $ok) if $$lifted;

        my @h = (["${pre}status", 'rejected'],
                 ["${pre}reset", $at],
                 ["${pre}representative-claim", 'five_hour']);
        push @h, ["${pre}slow-offer", 'treatment'] if $o{offer};
        return (429, \@h, $err);
    }

    my $slow_ok = [["${pre}slow-status", 'active']];

    return (200, $slow_ok, $ok) if $o{slow} eq 'ok';
    return (200, $slow_ok, $ok)
        if defined $o{times} && $self->{served}{$p}++ >= $o{times};

    if ($o{slow} eq '529') {
        my @h;
        push @h, ["${pre}slow-retry-after", $o{retry}] if defined $o{retry};
        push @h, ["${pre}slow-max-wait", $o{maxwait}] if defined $o{maxwait};
        return (529, \@h, '{"type":"error","error":{"type":'
                          . '"overloaded_error","message":"Overloaded"}}');
    }

    my @h = (["${pre}status", 'rejected'], ["${pre}reset", $at]);

    if ($o{slow} eq 'extra_usage') {
        push @h, ["${pre}slow-status", 'ineligible'],
                 ["${pre}overage-in-use", 'true'];
    } else {
        push @h, ["${pre}slow-status", $o{slow}];
    }

    push @h, ["${pre}slow-retry-after", $o{retry}] if defined $o{retry};
    push @h, ["${pre}slow-max-wait", $o{maxwait}] if defined $o{maxwait};
    push @h, ["${pre}slow-budget-reset", time + 3 * 86400]
        if $o{slow} eq 'budget_exhausted';

    return (429, \@h, $err);
}

# all logged requests, oldest first
sub requests {
    my ($self) = @_;
    open my $fh, '<', $self->{log} or return [];
    my @r = map { decode_json($_) } <$fh>;
    close $fh;
    return \@r;
}

sub clear { unlink $_[0]{log} }

sub stop {
    my ($self) = @_;
    return unless $self->{pid};
    kill 'TERM', $self->{pid};
    waitpid($self->{pid}, 0);
    delete $self->{pid};
}

sub DESTROY { $_[0]->stop }

1;
